"""What people read: the report and its sections, figures, the terminal, the notebook view, number formatting."""
