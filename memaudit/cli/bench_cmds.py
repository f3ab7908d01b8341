"""Commands: bench_cmds."""
COMMANDS: list = []
