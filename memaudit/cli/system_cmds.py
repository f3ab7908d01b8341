"""Commands: system_cmds."""
COMMANDS: list = []
