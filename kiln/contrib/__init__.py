"""kiln.contrib"""
