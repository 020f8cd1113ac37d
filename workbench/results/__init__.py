"""Results: the document, its journal, the report (table, JSON, CSV), --compare verdicts, provenance."""
