"""Commands: memory_cmds."""
COMMANDS: list = []
