"""DETECT and what follows from it: which AI CLIs are on this machine, and which of them a
council may use (user-defined runtimes, the consent gate). Part of the I/O edge: it spawns
probes and reads and writes ``.rune/runtimes.json``."""
