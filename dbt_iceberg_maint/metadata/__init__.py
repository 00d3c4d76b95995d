"""Health figures and maintenance plans read from Iceberg metadata with pyiceberg (no Spark)."""
