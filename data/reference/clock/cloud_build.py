"""Writes cloud_regions.csv from the values transcribed in cloud_README.md (per-GPU = instance price / GPUs)."""
import csv
SKY_AWS = "SkyPilot catalog skypilot-org/skypilot-catalog catalogs/v7/aws/vms.csv @001367d (AWS price-list snapshot; on-demand Linux)"
SKY_LAMBDA = "SkyPilot catalog skypilot-org/skypilot-catalog catalogs/v7/lambda/vms.csv @1158013 (Lambda public price list snapshot)"
CB = "AWS 'EC2 Capacity Blocks for ML Pricing' page (mirror sibshop.uat.jiralog.com/ec2/capacityblocks/pricing; rates valid until 2025-01-01 update), via shared/reference/cloud_gpu_prices.csv"
P_AWS = "on-demand: 2024-12..2025-05 (inferred, see README)"
COORD = {  # city coordinates (rounded), metro per region name; see README
 "ashburn": ("Ashburn, VA", 39.04, -77.49, "US"),
 "columbus": ("Columbus, OH metro", 39.96, -83.00, "US"),
 "boardman": ("Boardman, OR", 45.84, -119.70, "US"),
 "montreal": ("Montreal, QC", 45.50, -73.57, "CA"),
 "london": ("London", 51.51, -0.13, "GB"),
 "stockholm": ("Stockholm", 59.33, 18.07, "SE"),
 "frankfurt": ("Frankfurt am Main", 50.11, 8.68, "DE"),
 "mumbai": ("Mumbai", 19.08, 72.88, "IN"),
 "tokyo": ("Tokyo", 35.68, 139.69, "JP"),
 "sydney": ("Sydney", -33.87, 151.21, "AU"),
}
rows = [
 # id, region, metro, chip, instance, inst_price, ngpu, reserved, reserved_note, fabric
 ("aws-us-east-1-h100","us-east-1","ashburn","h100","p5.48xlarge",98.32,8,4.916,"reserved = EC2 Capacity Block p5.48xlarge US East (N. Virginia) $39.33/inst-h = $4.916/GPU-h, 2024-Q4 rate",3),
 ("aws-us-east-2-h100","us-east-2","columbus","h100","p5.48xlarge",98.32,8,4.916,"reserved = EC2 Capacity Block p5.48xlarge US East (Ohio) $4.916/GPU-h, 2024-Q4 rate",3),
 ("aws-us-west-2-h100","us-west-2","boardman","h100","p5.48xlarge",98.32,8,None,"reserved: gap (no Capacity Block price for p5 in us-west-2 on the retrieved page)",3),
 ("aws-ca-central-1-h100","ca-central-1","montreal","h100","p5.48xlarge",113.068,8,None,"reserved: gap",3),
 ("aws-eu-west-2-h100","eu-west-2","london","h100","p5.48xlarge",127.816,8,None,"reserved: gap",3),
 ("aws-eu-north-1-h100","eu-north-1","stockholm","h100","p5.48xlarge",105.2024,8,None,"reserved: gap",3),
 ("aws-ap-south-1-h100","ap-south-1","mumbai","h100","p5.48xlarge",117.984,8,None,"reserved: gap",3),
 ("aws-ap-northeast-1-h100","ap-northeast-1","tokyo","h100","p5.48xlarge",123.19496,8,None,"reserved: gap",3),
 ("aws-ap-southeast-2-h100","ap-southeast-2","sydney","h100","p5.48xlarge",127.816,8,None,"reserved: gap",3),
 ("aws-us-east-1-h200","us-east-1","ashburn","h200","p5en.48xlarge",84.8,8,None,"reserved: gap (Capacity Block H200 price on the retrieved page is for US East (Ohio) only)",3),
 ("aws-us-east-2-h200","us-east-2","columbus","h200","p5en.48xlarge",84.8,8,5.408,"reserved = EC2 Capacity Block 8xH200 instance US East (Ohio) $43.26/inst-h = $5.408/GPU-h, 2024-Q4 rate; NB the Capacity Block row is p5e (instance name missing in excerpt), the on-demand row is p5en",3),
 ("aws-ap-northeast-1-h200","ap-northeast-1","tokyo","h200","p5en.48xlarge",106.0,8,None,"reserved: gap",3),
 ("aws-ap-south-1-h200","ap-south-1","mumbai","h200","p5en.48xlarge",101.76,8,None,"reserved: gap",3),
 ("aws-us-east-1-l40s","us-east-1","ashburn","l40s","g6e.xlarge",1.861,1,None,"reserved: gap",0),
 ("aws-eu-north-1-l40s","eu-north-1","stockholm","l40s","g6e.xlarge",1.974,1,None,"reserved: gap",0),
 ("aws-eu-central-1-l4","eu-central-1","frankfurt","l4","g6.xlarge",1.0064,1,None,"reserved: gap",0),
 ("aws-ap-south-1-l4","ap-south-1","mumbai","l4","g6.xlarge",0.9664,1,None,"reserved: gap",0),
 ("aws-ap-northeast-1-l4","ap-northeast-1","tokyo","l4","g6.xlarge",1.1672,1,None,"reserved: gap",0),
]
out = []
for rid, region, metro, chip, inst, price, n, res, resnote, fab in rows:
    city, lat, lon, cc = COORD[metro]
    fabnote = ("fabric 3 = rule: AWS EFA-class UltraCluster networking (p5/p5en 3200 Gbps EFA) counted as tier 3"
               if fab == 3 else "fabric 0 = rule: single-GPU instance, no cluster fabric")
    out.append(dict(id=rid, name=f"AWS {region} ({city})", provider="aws", lat=lat, lon=lon, country=cc, chip=chip,
        usd_per_gpu_hour_on_demand=round(price / n, 4), usd_per_gpu_hour_reserved="" if res is None else res,
        cap_gpus="", fabric_tier=fab, period=P_AWS + ("; reserved: 2024-Q4 Capacity Block" if res else ""),
        source=f"on-demand: {SKY_AWS}, {inst} ${price}/instance-h / {n} GPU (derived); {resnote}; {fabnote}; "
               f"coords: city coordinates of {city} (metro rule, see cloud_README.md)"))
out.append(dict(id="lambda-h100-8x", name="Lambda Cloud gpu_8x_h100_sxm5 (same price in all listed regions)", provider="lambda",
    lat="", lon="", country="", chip="h100", usd_per_gpu_hour_on_demand=round(23.92 / 8, 4), usd_per_gpu_hour_reserved="",
    cap_gpus="", fabric_tier=0, period="catalog snapshot, date not established (see README)",
    source=f"on-demand: {SKY_LAMBDA}, gpu_8x_h100_sxm5 $23.92/instance-h / 8 (derived); identical in 17 listed regions incl. europe-central-1, asia-south-1, me-west-1; "
           "lat/lon/country gap: Lambda region metros not published in the source; reserved: gap; fabric 0 = rule: single 8-GPU on-demand instance, no inter-node fabric in the offer"))
cols = "id,name,provider,lat,lon,country,chip,usd_per_gpu_hour_on_demand,usd_per_gpu_hour_reserved,cap_gpus,fabric_tier,period,source".split(",")
with open("/tmp/clockdata/cloud_regions.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=cols); w.writeheader(); w.writerows(out)
print(len(out), "rows")
