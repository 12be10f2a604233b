"""Every way of scoring an item, behind one interface (base.Scorer)."""
