"""Groups judged within themselves: schedules, comparison prompts, the judge, and the win matrix."""
