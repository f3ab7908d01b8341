"""Commands: rollout_cmds."""
COMMANDS: list = []
