"""The subcommands of `compare`, a module each (run.py is `compare run`), each with one cmd_<name>(args) -> int.
compare/cli.py parses the command line and calls them; what several share is in common.py, and what run,
check and sweep run is planned in plan.py and executed in execute.py."""
