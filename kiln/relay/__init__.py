"""kiln.relay"""
