"""Deliberation beyond one pass: typed moves, the tally, vote, rank, rounds and red team.

Everything here that decides something is arithmetic over contract models (``dsl``,
``tally``, ``concordance``, ``vote``, ``rank``, ``rounds``, ``redteam``, ``metadata``).
A deliberation method (``methods/``, behind the ``Method`` protocol of ``method``) turns one
round into an outcome; ``registry`` names the methods, ``ballots`` collects every method's
ballots, ``chair`` asks the chairman, and ``runner`` runs the rounds.
"""
