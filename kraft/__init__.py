"""kraft"""
