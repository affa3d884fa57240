"""Command-line subcommands, one module each.

Every module here defines ``register(sub)`` that adds one subparser to ``sub`` (an
``argparse`` sub-parsers object) and sets ``func`` on it: a callable taking the parsed
arguments and returning the process exit code. ``mirage_formal.cli`` discovers the modules,
so adding a command touches only its own file.
"""
