"""Every way of scoring an item, behind one interface (base.py); a new scorer is a module or folder here."""
