"""dyno-cli's side of a cluster trace: start it on each host (start), follow it (cluster, progress), fetch the files
(fetch), and record what happened per host (records) in the trace folder's manifest (manifest)."""
