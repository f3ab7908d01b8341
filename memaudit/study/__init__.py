"""Studies larger than one machine: shards of a study (shard.py), their merge into one store
(merge.py), and what a study costs before and after it runs (cost.py, plan.py)."""
