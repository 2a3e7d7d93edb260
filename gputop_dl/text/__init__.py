"""Text helpers shared by every output (console, TUI, reports, lab): formatting, Markdown, consoles."""
