"""What the tests share and are not tests themselves: the models and factories, the fault proxy and its run, an
app's model modules (``apps/``), client hooks and stream records."""
