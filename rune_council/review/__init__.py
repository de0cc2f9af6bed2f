"""``rune council review``: a council on a change, read where reviewers and CI read.

The change comes from git (the working tree, the index or a range of commits) or from a
unified diff (``diff``); it becomes one artifact whose every line says its place
(``artifact``); a council of mode ``review`` sits on it through the intake every door uses
(``run``); its verdict becomes findings at their places (``findings``), shown as SARIF
(``sarif``), workflow-command annotations (``annotations``) or a pull-request comment
(``comment``), and decides a CI gate (``gate``). ``action`` is the GitHub Action's entry
point. Nothing is imported here, so a council that asks a question loads none of it.
"""
