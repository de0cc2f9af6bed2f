"""The built-in deliberation methods, one module each; ``..registry`` lists them by name."""
