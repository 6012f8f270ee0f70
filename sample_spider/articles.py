"""Article texts of the bundled demo site (written for this project; free to reuse)."""

from __future__ import annotations

ZH_METRO = [
    "本报讯 记者从市交通运输局获悉,地铁十二号线一期工程已于昨日完成全部车站主体结构施工,"
    "预计明年六月开通初期运营。十二号线一期全长二十八点六公里,共设车站二十一座,其中换乘站七座,"
    "连接城市东部新区、老城区和西部高新技术产业园区。",
    "据介绍,十二号线采用六节编组A型列车,最高运行速度每小时一百公里,开通初期最小行车间隔为四分钟。"
    "全线车站均设置无障碍电梯、母婴室和自助售票设备,乘客可以使用交通卡、手机二维码和银行卡直接刷卡进站。",
    "市交通运输局有关负责人表示,十二号线建成后,从东部新区到市中心的通勤时间将由目前的七十分钟缩短到"
    "四十分钟左右,将有效缓解东西向主干道的交通压力。沿线的公交线路也将同步优化调整,新增和调整接驳公交"
    "线路十五条,方便市民换乘。",
    "在施工过程中,建设单位采用了盾构掘进、装配式车站等新技术,减少了对周边居民生活和道路交通的影响。"
    "其中,穿越老城区的区间隧道距离历史建筑最近处仅有十二米,施工团队通过实时监测和精细化注浆控制,"
    "确保了历史建筑的安全。",
    "目前,十二号线已经进入机电设备安装和装饰装修阶段,接下来还将进行轨道铺设、系统联调和试运行等工作。"
    "市民如对线路建设有意见和建议,可以通过市政府网站和热线电话反映。",
]

ZH_RAIN = [
    "气象台今天上午发布暴雨蓝色预警信号,预计今天夜间到明天白天,我市大部分地区将出现大到暴雨,"
    "局部地区有大暴雨,并伴有短时强降水、雷电和七级以上雷暴大风等强对流天气。",
    "防汛部门提醒,请有关单位和人员做好防范工作,注意防范城市内涝、山洪、山体滑坡和泥石流等灾害。"
    "低洼地区的居民要提前转移贵重物品,地下车库和地下商场要做好挡水准备,在建工地要加固临时设施。",
    "交通部门表示,降雨期间部分下穿通道可能出现积水,将视情况实施临时交通管制。驾车出行的市民应减速慢行,"
    "不要强行通过积水路段。教育部门要求各学校密切关注天气变化,必要时调整上下学时间。",
    "据气象专家分析,此次降雨过程是受副热带高压边缘暖湿气流和北方冷空气共同影响形成的,降雨强度大、"
    "持续时间短、局地性强。预计降雨将在后天上午逐渐减弱,之后以多云天气为主,气温有所回升。",
]

ZH_AI = [
    "近日,本市一家人工智能企业发布了面向制造业的质检大模型,该模型可以通过工业相机拍摄的图像,"
    "自动识别零部件表面的划痕、裂纹和变形等缺陷,识别准确率达到百分之九十九以上。",
    "企业负责人介绍,传统的人工质检需要工人长时间盯着流水线,容易疲劳,漏检率较高。引入视觉检测系统后,"
    "一条生产线可以减少六名质检人员,检测速度提高三倍。目前,该系统已在汽车零部件、电子元器件和家用电器等"
    "行业的四十多家工厂投入使用。",
    "专家指出,工业场景的数据往往分散在不同企业手中,缺陷样本数量少、种类多,这是制约人工智能在制造业落地的"
    "主要难题。该企业采用小样本学习和数据合成技术,只需要几十张缺陷图片就可以完成新产品的模型训练。",
    "市经济和信息化局表示,将继续支持人工智能与实体经济深度融合,鼓励企业开放应用场景,推动更多智能化"
    "解决方案在中小企业中推广应用,帮助传统产业提质增效。",
]

EN_LIBRARY = [
    "The city library will extend its opening hours from next Monday, staying open until ten in the "
    "evening on weekdays and opening at eight on Saturday and Sunday mornings. The change follows a "
    "survey in which more than four thousand residents asked for longer evening hours.",
    "Head librarian Maria Okafor said the extra hours were made possible by a new self-service system "
    "that lets members borrow and return books, reserve study rooms and print documents without "
    "waiting at the front desk. Staff will still be available at the information point until eight.",
    "The library has also added forty new study desks on the second floor, each with a power socket "
    "and a reading lamp, and the quiet room on the third floor has been refurbished with better "
    "ventilation. Students preparing for exams have long complained that seats ran out by noon.",
    "Children's story time moves from Wednesday afternoon to Saturday morning so that working parents "
    "can attend, and the monthly book club for adults will meet on the first Thursday of each month. "
    "Membership remains free for everyone who lives, works or studies in the city.",
    "The council expects the longer hours to cost about two hundred thousand a year, mostly for "
    "security and cleaning, and will review attendance figures after six months before deciding "
    "whether to make the schedule permanent.",
]

EN_MARATHON = [
    "More than twelve thousand runners took part in the annual riverside marathon on Sunday, setting a "
    "new participation record for the event. The winner of the men's race crossed the line in two "
    "hours and nine minutes, while the women's race was decided in a sprint over the final kilometre.",
    "Organisers closed several bridges and the main embankment road from six in the morning until "
    "three in the afternoon. Volunteers staffed twenty water stations along the course, and medical "
    "teams treated around one hundred runners, mostly for cramps and dehydration in the warm weather.",
    "This year the race introduced reusable cups at every water station, which organisers say cut "
    "plastic waste by more than half compared with last year. Local businesses along the route "
    "reported a busy morning as spectators gathered to cheer the runners.",
    "Registration for next year's race opens in January. The organisers said they plan to add a "
    "wheelchair category and a shorter family run so that more residents can join the event.",
]

EDITS_ZH_METRO = [
    ("预计明年六月开通初期运营", "预计明年年中开通初期运营"),
    ("新增和调整接驳公交线路十五条", "新增和调整接驳公交线路十六条"),
]
EDITS_EN_LIBRARY = [("more than four thousand residents", "over four thousand residents")]
