"""`dyno-cli opportunities`: for each antipattern rule, the GPU-hours the fleet would recover by fixing it, from the
jobs' GPU-hours and their latest host-side analyses (docs/OPPORTUNITIES.md).

model.py holds the typed inputs and answer; ranking.py computes it from typed inputs (prometheus.py gathers those
from a Prometheus server's series); columns.py and column_ranking.py compute the same answer from the daemons'
columnar ListJobs pages; text.py, jsondoc.py and html.py show it.
"""
