"""rune-council."""
