"""Step 4, collection: every run's row into runs.csv and the per-machine summary (aggregate), how
sure each number is (uncertainty: replicates, intervals, the robust line fit), and the reference
machines shown beside a run (reference).
"""
