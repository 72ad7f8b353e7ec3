"""Model systems without mlflow: models resolved, their candidates scored into rows, what ``predict`` may return."""
