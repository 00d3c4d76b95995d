"""A Spark JDBC catalog's URI for pyiceberg's SqlCatalog: `jdbc:postgresql://...` to SQLAlchemy's
`postgresql+psycopg2://...` (every JDBC parameter translated to libpq's or refused) and
`jdbc:sqlite:PATH` to `sqlite:///PATH`."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from dbt_iceberg_maint.errors import UsageError

# PostgreSQL JDBC URI parameters -> libpq's (what psycopg2 takes). None: the value needs a
# translation below. A parameter missing here is refused, never dropped: `currentSchema` decides
# which catalog tables are read, `sslmode` whether the connection is encrypted.
_JDBC_TO_LIBPQ: dict[str, str | None] = {
    "sslmode": "sslmode", "sslrootcert": "sslrootcert", "sslcert": "sslcert", "sslkey": "sslkey",
    "sslpassword": "sslpassword", "ssl": None, "currentSchema": None, "options": None,
    "ApplicationName": "application_name", "connectTimeout": "connect_timeout", "targetServerType": None,
    "gssEncMode": "gssencmode", "user": None, "password": None,
}


def _libpq_parameters(query: str, jdbc_uri: str) -> tuple[dict[str, str], str | None, str | None]:
    """(libpq parameters, user, password) from a JDBC URI's query string."""
    params: dict[str, str] = {}
    user = password = None
    search_path: list[str] = []
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key not in _JDBC_TO_LIBPQ:
            raise UsageError(f"catalog property uri={jdbc_uri}: JDBC URI parameter `{key}` ({key}={value}) has no "
                             "equivalent for pyiceberg's PostgreSQL connection; supported: "
                             f"{', '.join(_JDBC_TO_LIBPQ)}")
        target = _JDBC_TO_LIBPQ[key]
        if target is not None:
            params[target] = value
        elif key == "user":
            user = value
        elif key == "password":
            password = value
        elif key == "ssl":
            if value.lower() in ("true", ""):
                params.setdefault("sslmode", "require")
        elif key == "currentSchema":
            search_path.append(value)
        elif key == "options":
            params["options"] = value
        elif key == "targetServerType":
            params["target_session_attrs"] = {"primary": "read-write", "master": "read-write",
                                              "secondary": "read-only", "slave": "read-only"}.get(value, value)
    if search_path:
        params["options"] = " ".join(filter(None, [params.get("options"), f"-c search_path={','.join(search_path)}"]))
    return params, user, password


def sqlalchemy_uri(jdbc_uri: str, user: str | None, password: str | None) -> str:
    """jdbc:postgresql://host:port/db?k=v -> postgresql+psycopg2://user:password@host:port/db?k=v,
    every JDBC parameter kept (translated to libpq's name) or refused."""
    if jdbc_uri.startswith("jdbc:sqlite:"):
        return "sqlite:///" + jdbc_uri.removeprefix("jdbc:sqlite:")
    if not jdbc_uri.startswith("jdbc:postgresql://"):
        raise UsageError(f"catalog property uri={jdbc_uri} is not supported for type=jdbc; "
                         "supported: jdbc:postgresql://host:port/db, jdbc:sqlite:PATH")
    parts = urlsplit(jdbc_uri.removeprefix("jdbc:"))
    params, uri_user, uri_password = _libpq_parameters(parts.query, jdbc_uri)
    # jdbc.user / jdbc.password win over the URI's own, as in the JDBC driver.
    user, password = user or uri_user, password or uri_password
    auth = ""
    if user:
        auth = quote(user, safe="") + (":" + quote(password, safe="") if password else "") + "@"
    query = ("?" + urlencode(params, quote_via=quote)) if params else ""
    return f"postgresql+psycopg2://{auth}{parts.netloc}{parts.path}{query}"


def sqlite_file(jdbc_uri: str) -> Path | None:
    if not jdbc_uri.startswith("jdbc:sqlite:"):
        return None
    path = jdbc_uri.removeprefix("jdbc:sqlite:").split("?", 1)[0].removeprefix("file:")
    return None if not path or path.startswith(":memory:") else Path(path)

