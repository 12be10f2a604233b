"""SemScore: embedding cosine of the completion and the human reference, no judge read."""
