"""Studies larger than one machine: shards of a study (shard.py), and what a study costs before
and after it runs (cost.py, plan.py). Their merge into one store is table-level store work:
memaudit/store/merge.py."""
