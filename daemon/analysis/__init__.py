"""dynod's host-side analysis of finished traces: a queue, one niced, memory- and time-capped worker process at a
time, the summaries kept in the job database and served by GetTraceSummary, ListJobs and Prometheus."""
