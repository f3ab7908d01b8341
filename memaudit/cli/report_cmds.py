"""Commands: report_cmds."""
COMMANDS: list = []
