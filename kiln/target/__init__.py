"""kiln.target"""
