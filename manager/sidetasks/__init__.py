"""Side tasks of a pass, each writing only its own object: the CRD annotator, the upgrade
gate, the operator's own monitoring, the console QuickStart."""
