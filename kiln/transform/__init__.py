"""kiln.transform"""
