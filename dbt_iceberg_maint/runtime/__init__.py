"""The runtime: the processes, Spark and dbt in-process that the shells run on.

- `spark`: the embedded Spark + Iceberg session (pyspark imported lazily; the driver's log
  settings: Spark's defaults plus `log4j2.properties`); `thrift_server`: a local Spark Thrift Server.
- `embedded_catalog`: the embedded default catalog (Iceberg's JDBC catalog on a SQLite file);
  `embedded_profile`: a dbt profile's embedded catalog prepared before dbt connects;
  `dbt_plugin`: the dbt plugin that does so for plain `dbt`; `driver_memory`: the driver's heap.
- `processes`: the one process shell (own process group, parent-death signal, ready wait, stop).
- `invoke`: one dbt invocation in-process (`dbtRunner`), its events, the manifest graph.
- `project_files`: where the dbt package and the demo project are (a checkout or a wheel).
- `_conflict_gate`: private: a UDF that holds a MERGE task so a real conflict can be staged.

Nothing is imported here: each caller takes the one module it needs (the lab's process shell
must not import dbt or pyspark).
"""

from __future__ import annotations
