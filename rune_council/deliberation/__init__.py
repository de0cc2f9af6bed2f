"""Deliberation beyond one pass: typed moves, the tally, vote, rank, rounds and red team.

Everything here that decides something is arithmetic over contract models (``dsl``,
``tally``, ``concordance``, ``vote``, ``rank``, ``rounds``, ``redteam``, ``metadata``);
only ``runner`` talks to runtimes, and it does so through the same ``Runtime.ask`` as the
council's voices.
"""
