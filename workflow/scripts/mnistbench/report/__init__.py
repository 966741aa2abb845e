"""Step 5, the report: the tables every comparison needs (tables), the facts the report states, as
data (facts), the words that phrase each fact once (words, with its templates), and the figures
that draw the tables (figures).
"""
