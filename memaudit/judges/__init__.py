"""Judges you can check (issue 24): a judge panel with a median score (panel.py), agreement
statistics (agreement.py), control answers that expose a lenient or harsh judge (controls.py),
human grades from the audit page (human.py), and the `judges` section of the tables (section.py).

Arrows: scoring calls the panel through `Scorer.panel`; tables and the report read the section;
nothing here is imported by the model client."""
