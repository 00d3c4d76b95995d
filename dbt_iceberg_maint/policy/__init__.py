"""The one maintenance policy engine of the Python layer (pure, no I/O).

`engine` resolves and checks `meta.iceberg_maint` and decides a table's plan steps,
`operations` holds each operation's defaults, checks, due rule and SQL, `checks` and `sql` the
argument checks and CALL text of the procedure macros, `gate` the cost gate. Each mirrors a
macro named in its docstring; tests/policy_cases.yml runs both sides on the same cases.
"""
