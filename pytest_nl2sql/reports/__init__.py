"""Report writers: each turns the JSON report dict (`{"summary", "items"}`) into one format."""
