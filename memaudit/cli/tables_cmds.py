"""Commands: tables_cmds."""
COMMANDS: list = []
