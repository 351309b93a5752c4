"""`dyno-cli opportunities`: for each antipattern rule, the GPU-hours the fleet would recover by fixing it, from the
jobs' GPU-hours and their latest host-side analyses (docs/OPPORTUNITIES.md).

model.py holds the typed inputs and answer, ranking.py computes it, records.py and prometheus.py gather the inputs
(ListJobs records; a Prometheus server's series), text.py, jsondoc.py and html.py show it.
"""
