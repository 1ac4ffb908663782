def load_ipython_extension(ip): print("loaded ext")
