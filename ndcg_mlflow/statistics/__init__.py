"""The statistics: numbers in, numbers out, the same for every engine; no text, no rendering imports."""
