"""Flink SQL and Table API jobs' state by the SQL's own column names: RowData decoded to columns (`decoders`), and
the operators matched to the nodes of Flink's compiled plan to name them (`plan`)."""
