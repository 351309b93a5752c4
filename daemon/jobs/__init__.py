"""Job accounting: which job holds which GPU (attribution), per-job records accumulated every sampling tick
(records), kept in SQLite under state_dir (store), and the glue that dynod wires in (accounting, service)."""
