"""Commands: score_cmds."""
COMMANDS: list = []
