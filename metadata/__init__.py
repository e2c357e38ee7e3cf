"""metadata"""
