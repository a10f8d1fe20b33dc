"""kiln.driver"""
