"""The one great-circle distance of dcplace: the haversine on a sphere of radius 6371.0088 km
(the IUGG mean radius). The model's latency (optimizer.model.latency), the clock's time zones,
the input warnings (models.checks) and the map layers' distance_km (reports.layers) all use it;
the independent checker (optimizer/checker/) keeps its own copy, since it imports nothing of
dcplace.
"""

from __future__ import annotations

import numpy as np

EARTH_RADIUS_KM = 6371.0088


def great_circle_km(lat1, lon1, lat2, lon2) -> np.ndarray:
    """Haversine distance in km; broadcasts over numpy arrays."""
    phi1, phi2 = np.radians(lat1), np.radians(lat2)
    dphi = phi2 - phi1
    dlmb = np.radians(np.asarray(lon2) - np.asarray(lon1))
    a = np.sin(dphi / 2) ** 2 + np.cos(phi1) * np.cos(phi2) * np.sin(dlmb / 2) ** 2
    return 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(a, 0.0, 1.0)))


__all__ = ["EARTH_RADIUS_KM", "great_circle_km"]
